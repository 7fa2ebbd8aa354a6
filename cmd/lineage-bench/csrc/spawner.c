// spawner: forks as fast as it can and reports its rate. Used by
// lineage-bench to measure what the tracker costs a process-heavy workload.
//
//   spawner fork N   fork, child _exit(0), parent waitpid; N times
//   spawner exec N   fork, child execs /bin/true, parent waitpid; N times
//
// It prints "<ops> <seconds>" on stdout.
//
//   spawner paced RATE SECONDS ARGBYTES WORKERS
//                    WORKERS processes each fork, exec /bin/true with one
//                    argument of ARGBYTES bytes (0: no exec, the child
//                    exits), and wait, at RATE/WORKERS a second, for
//                    SECONDS; the same output, all workers' processes
//                    counted (behind the pace, as fast as they can)
//
//   spawner spin SECONDS
//                    a busy loop for SECONDS (a CPU hog beside a figure)
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

/* One paced worker: n processes, one every period seconds from start. */
static long paced_worker(double start, double period, double seconds, char *arg)
{
	char *child_argv[] = {"/bin/true", arg, NULL};
	char *child_env[] = {NULL};
	long n = 0;

	for (double next = start; now() < start + seconds; next += period) {
		double wait = next - now();
		if (wait > 0) {
			struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
			nanosleep(&ts, NULL);
		}
		pid_t pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0) {
			if (arg)
				execve(child_argv[0], child_argv, child_env);
			_exit(arg ? 127 : 0);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid)
			return -1;
		n++;
	}
	return n;
}

static int paced(double rate, double seconds, long argbytes, int workers)
{
	int fds[2];
	char *arg = NULL;

	if (rate <= 0 || seconds <= 0 || argbytes < 0 || workers < 1 || pipe(fds))
		return 2;
	if (argbytes > 0) {
		if (!(arg = malloc(argbytes + 1)))
			return 2;
		memset(arg, 'a', argbytes);
		arg[argbytes] = 0;
	}
	double start = now() + 0.05;
	for (int w = 0; w < workers; w++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			double period = workers / rate;
			long n = paced_worker(start + w * period / workers, period, seconds, arg);
			if (write(fds[1], &n, sizeof(n)) != sizeof(n))
				_exit(1);
			_exit(n < 0);
		}
	}
	close(fds[1]);
	long total = 0, n;
	while (read(fds[0], &n, sizeof(n)) == sizeof(n)) {
		if (n < 0)
			return 1;
		total += n;
	}
	while (wait(NULL) > 0)
		;
	printf("%ld %.9f\n", total, now() - start);
	return 0;
}

static int spin(double seconds)
{
	double end = now() + seconds;
	volatile unsigned long n = 0;

	while (now() < end)
		for (int i = 0; i < 100000; i++)
			n++;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "spin") == 0)
		return spin(atof(argv[2]));
	if (argc >= 3 && strcmp(argv[1], "rss") == 0)
		return peak_rss(argv + 2);
	if (argc == 6 && strcmp(argv[1], "paced") == 0)
		return paced(atof(argv[2]), atof(argv[3]), atol(argv[4]), atoi(argv[5]));
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
