//go:build cgo

// lineage exec's fast path: the registration and the execve of the
// command, done in a constructor, before the Go runtime starts. See doc.go
// for what it promises; in short, it handles the plain, well-formed
// command line and returns, having changed nothing, for everything else, so
// that Go's `lineage exec` runs it as if this were not here.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fastexec.h"

// A growing string; failed is set once an allocation failed.
struct buf {
	char *p;
	size_t len, cap;
	int failed;
};

static void put(struct buf *b, const char *s, size_t n) {
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 512;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void put_str(struct buf *b, const char *s) { put(b, s, strlen(s)); }

// utf8_len is the length of the well-formed UTF-8 sequence at s (RFC 3629:
// no overlong form, no surrogate, nothing past U+10FFFF), or 0. s is
// NUL-terminated: a NUL ends a sequence early, so nothing past it is read.
static size_t utf8_len(const unsigned char *s) {
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

// put_json appends s as a JSON string. It fails (-1) on a string that
// isn't UTF-8, which Go's encoder would change (to U+FFFD): Go's path
// sends those.
static int put_json(struct buf *b, const char *s) {
	put(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			put(b, e, 2);
			p++;
		} else if (*p < 0x20) {
			char e[8];
			snprintf(e, sizeof e, "\\u%04x", *p);
			put(b, e, 6);
			p++;
		} else {
			size_t n = utf8_len(p);
			if (n == 0)
				return -1;
			put(b, (const char *)p, n);
			p += n;
		}
	}
	put(b, "\"", 1);
	return 0;
}

// The flags of `lineage exec` the fast path takes; cmd is the index of
// the command's first word in argv.
struct opts {
	const char *session, *kind, *label, *socket;
	int cmd;
};

// flag_value reads argv[i] as --name=VALUE or --name VALUE, as pflag
// does: it returns how many words it took (1 or 2), 0 when argv[i] is
// another flag, -1 when the value is missing.
static int flag_value(int argc, char **argv, int i, const char *name, const char **val) {
	const char *a = argv[i] + 2;
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n] != 0)
		return 0;
	if (i + 1 >= argc)
		return -1;
	*val = argv[i + 1];
	return 2;
}

// parse reads `lineage exec [flags] [--] COMMAND...` as cobra would, for
// the long flags --session, --kind, --label and --socket alone, the last
// of each winning. Flags end at "--" or at the first word that isn't one
// (the command's flags are its own). Anything else (--json, --help, -h, an
// unknown flag, no command, no session) is -1: Go's to run.
static int parse(int argc, char **argv, struct opts *o) {
	static const char *const names[] = {"session", "kind", "label", "socket"};
	const char **vals[] = {&o->session, &o->kind, &o->label, &o->socket};
	int i = 2;
	while (i < argc) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == 0)
			break;
		if (a[1] != '-')
			return -1;
		int used = 0;
		for (size_t k = 0; k < sizeof names / sizeof names[0] && used == 0; k++)
			used = flag_value(argc, argv, i, names[k], vals[k]);
		if (used <= 0)
			return -1;
		i += used;
	}
	if (i >= argc || o->session == NULL || o->session[0] == 0)
		return -1;
	o->cmd = i;
	return 0;
}

static int executable(const char *path) {
	struct stat st;
	if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
		return 0;
	return faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

// look_path returns, allocated, the file to execve for name, as Go's
// exec.LookPath finds it; NULL leaves it to Go: not found, or $PATH unset
// or with an entry that isn't absolute (Go refuses a command found through
// one: exec.ErrDot).
static char *look_path(const char *name) {
	if (strchr(name, '/'))
		return executable(name) ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (path == NULL || path[0] == 0)
		return NULL;
	for (const char *dir = path;;) {
		const char *end = strchrnul(dir, ':');
		size_t n = (size_t)(end - dir);
		if (n == 0 || dir[0] != '/')
			return NULL;
		while (n > 1 && dir[n - 1] == '/')
			n--;
		char *full = malloc(n + strlen(name) + 2);
		if (full == NULL)
			return NULL;
		memcpy(full, dir, n);
		full[n] = '/';
		strcpy(full + n + 1, name);
		if (executable(full))
			return full;
		free(full);
		if (*end == 0)
			return NULL;
		dir = end + 1;
	}
}

// self_start reads this process's start time, in clock ticks since boot:
// the 22nd field of /proc/self/stat, counted after the command's name,
// which may hold spaces and parentheses.
static int self_start(unsigned long long *start) {
	char b[4096];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return -1;
	b[n] = 0;
	char *p = strrchr(b, ')');
	if (p == NULL)
		return -1;
	char *save = NULL, *tok = strtok_r(p + 1, " ", &save);
	for (int field = 3; tok != NULL && field < 22; field++)
		tok = strtok_r(NULL, " ", &save);
	if (tok == NULL)
		return -1;
	char *end;
	errno = 0;
	*start = strtoull(tok, &end, 10);
	return errno != 0 || end == tok ? -1 : 0;
}

// body builds the request's JSON: api.AddRoot, with kind and label left
// out when empty, as Go's encoder leaves them out.
static int body(struct buf *b, const struct opts *o, int argc, char **argv, unsigned long long start) {
	char num[64];
	snprintf(num, sizeof num, "{\"pid\":%ld,\"start\":%llu,\"session\":", (long)getpid(), start);
	put_str(b, num);
	if (put_json(b, o->session) != 0)
		return -1;
	if (o->kind != NULL && o->kind[0] != 0) {
		put_str(b, ",\"kind\":");
		if (put_json(b, o->kind) != 0)
			return -1;
	}
	if (o->label != NULL && o->label[0] != 0) {
		put_str(b, ",\"label\":");
		if (put_json(b, o->label) != 0)
			return -1;
	}
	put_str(b, ",\"command\":[");
	for (int i = o->cmd; i < argc; i++) {
		if (i > o->cmd)
			put(b, ",", 1);
		if (put_json(b, argv[i]) != 0)
			return -1;
	}
	put_str(b, "]}");
	return b->failed ? -1 : 0;
}

static int send_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

// registered sends the request on a connection of its own and reads the
// answer's status line: 1 for a 2xx (the daemon registered this process),
// 0 for any other answer or none.
static int registered(const char *socket_path, const struct buf *b) {
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	// An abstract address (@name) is Go's to dial.
	if (socket_path[0] == '@' || strlen(socket_path) >= sizeof sa.sun_path)
		return 0;
	strcpy(sa.sun_path, socket_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int ok = 0;
	char head[256], status[64];
	int hn = snprintf(head, sizeof head,
			  "POST /v1/roots HTTP/1.1\r\nHost: lineage\r\nUser-Agent: lineage-exec\r\n"
			  "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  b->len);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || send_all(fd, head, (size_t)hn) != 0 ||
	    send_all(fd, b->p, b->len) != 0)
		goto out;
	size_t got = 0;
	while (got < sizeof status - 1 && memchr(status, '\n', got) == NULL) {
		ssize_t r = read(fd, status + got, sizeof status - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	// "HTTP/1.1 201 Created\r\n"
	ok = got >= 13 && strncmp(status, "HTTP/1.", 7) == 0 && status[8] == ' ' && status[9] == '2' &&
	     status[10] >= '0' && status[10] <= '9' && status[11] >= '0' && status[11] <= '9' && status[12] == ' ';
out:
	close(fd);
	return ok;
}

// lower_first copies msg with its first letter in lower case, as Go
// spells the error numbers' messages ("exec format error").
static void lower_first(char *dst, size_t n, const char *msg) {
	snprintf(dst, n, "%s", msg);
	if (dst[0] >= 'A' && dst[0] <= 'Z')
		dst[0] = (char)(dst[0] - 'A' + 'a');
}

// fastexec runs as the process starts, with one thread, before the Go
// runtime. It returns unless it registered this process and exec'd the
// command (or exec'd nothing and exited, as Go's path exits then).
__attribute__((constructor)) static void fastexec(int argc, char **argv, char **envp) {
	if (argc < 3 || argv == NULL || strcmp(argv[1], "exec") != 0)
		return;
	const char *cpu = getenv(FASTEXEC_ENV_CPUPROFILE), *block = getenv(FASTEXEC_ENV_BLOCKPROFILE);
	if ((cpu != NULL && cpu[0] != 0) || (block != NULL && block[0] != 0))
		return;
	struct opts o = {0};
	if (parse(argc, argv, &o) != 0)
		return;
	const char *sock = o.socket;
	if (sock == NULL || sock[0] == 0)
		sock = getenv(FASTEXEC_ENV_SOCKET);
	if (sock == NULL || sock[0] == 0)
		sock = FASTEXEC_DEFAULT_SOCKET;
	unsigned long long start;
	char *path = look_path(argv[o.cmd]);
	if (path == NULL)
		return;
	struct buf b = {0};
	if (self_start(&start) != 0 || body(&b, &o, argc, argv, start) != 0 || !registered(sock, &b)) {
		free(b.p);
		free(path);
		return;
	}
	free(b.p);
	execve(path, argv + o.cmd, envp);
	char msg[256];
	lower_first(msg, sizeof msg, strerror(errno));
	dprintf(2, "lineage: exec %s: %s\n", argv[o.cmd], msg);
	_exit(FASTEXEC_CANNOT_RUN);
}
