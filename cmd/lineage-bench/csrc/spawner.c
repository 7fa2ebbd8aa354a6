// spawner: forks as fast as it can and reports its rate. Used by
// lineage-bench to measure what the tracker costs a process-heavy workload.
//
//   spawner fork N   fork, child _exit(0), parent waitpid; N times
//   spawner exec N   fork, child execs /bin/true, parent waitpid; N times
//
// It prints "<ops> <seconds>" on stdout.
//
//   spawner rss CMD [ARGS...]   fork, child execs CMD (its output to
//                               /dev/null), parent wait4s; prints CMD's
//                               peak resident set in KiB
//
// A real fork, not vfork: the kernel counts the parent's resident set at
// the child's exec toward the child's peak, and this parent is small.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int peak_rss(char **argv)
{
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) != pid)
		return 1;
	printf("%ld\n", ru.ru_maxrss);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "rss") == 0)
		return peak_rss(argv + 2);
	if (argc != 3)
		return 2;
	int exec_mode = strcmp(argv[1], "exec") == 0;
	long n = atol(argv[2]);
	char *child_argv[] = {"/bin/true", NULL};
	char *child_env[] = {NULL};
	double start = now();
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			if (exec_mode)
				execve(child_argv[0], child_argv, child_env);
			_exit(0);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid)
			return 1;
	}
	printf("%ld %.9f\n", n, now() - start);
	return 0;
}
