/* shim_exec_probe MODE FILE ARG0 [ARGS...]: calls one exec or spawn function
 * of libc on FILE with argv ARG0 ARGS (at most 4 ARGS for the execl forms).
 * exec modes: on failure prints "ERRNO <n>" and exits 100.
 * spawn modes: waits for the child and exits with its status; on failure
 * prints "ERRNO <n>" and exits 100.
 * thread-execvp: execvp from a thread with a 64 KiB stack (the shim's hooks
 * must fit in it). null-<mode>: calls <mode> with a NULL FILE and prints
 * "ERRNO <n>" (or the spawn family's returned error).
 * Used by tests/shim/shim_test.cpp with and without the shim preloaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static int fail(int err) {
  printf("ERRNO %d\n", err);
  fflush(stdout);
  return 100;
}

static int wait_child(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return fail(errno);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct thread_exec {
  const char* file;
  char** args;
  int err;
};

static void* exec_in_thread(void* arg) {
  struct thread_exec* t = arg;
  execvp(t->file, t->args);
  t->err = errno;
  return NULL;
}

/* execvp on a thread whose whole stack is 64 KiB; returns only on failure. */
static int thread_execvp(const char* file, char** args) {
  struct thread_exec t = {file, args, 0};
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  if (pthread_create(&thread, &attr, exec_in_thread, &t) != 0) return fail(EAGAIN);
  pthread_join(thread, NULL);
  return fail(t.err);
}

static int null_file(const char* mode, char** args) {
  pid_t pid;
  int rc = 0;
  errno = 0;
  if (!strcmp(mode, "execve"))
    execve(NULL, args, environ);
  else if (!strcmp(mode, "execvp"))
    execvp(NULL, args);
  else if (!strcmp(mode, "execveat"))
    execveat(AT_FDCWD, NULL, args, environ, 0);
  else if (!strcmp(mode, "posix_spawn"))
    rc = posix_spawn(&pid, NULL, NULL, NULL, args, environ);
  else if (!strcmp(mode, "posix_spawnp"))
    rc = posix_spawnp(&pid, NULL, NULL, NULL, args, environ);
  else
    return 2;
  return fail(rc ? rc : errno);
}

/* argv[i], or NULL past the end; argv[3] (ARG0) always exists. */
#define A(i) (argc > (i) ? argv[i] : NULL)
#pragma GCC diagnostic ignored "-Wnonnull"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: shim_exec_probe MODE FILE ARG0 [ARGS...]\n");
    return 2;
  }
  const char* mode = argv[1];
  const char* file = argv[2];
  char** args = argv + 3;
  fflush(stdout);
  if (!strncmp(mode, "null-", 5)) return null_file(mode + 5, args);
  if (!strcmp(mode, "thread-execvp")) return thread_execvp(file, args);
  if (!strcmp(mode, "execve"))
    execve(file, args, environ);
  else if (!strcmp(mode, "execv"))
    execv(file, args);
  else if (!strcmp(mode, "execvp"))
    execvp(file, args);
  else if (!strcmp(mode, "execvpe"))
    execvpe(file, args, environ);
  else if (!strcmp(mode, "execveat"))
    execveat(AT_FDCWD, file, args, environ, 0);
  else if (!strcmp(mode, "execl"))
    execl(file, A(3), A(4), A(5), A(6), A(7), (char*)NULL);
  else if (!strcmp(mode, "execlp"))
    execlp(file, A(3), A(4), A(5), A(6), A(7), (char*)NULL);
  else if (!strcmp(mode, "execle"))
    execle(file, A(3), A(4), A(5), A(6), A(7), (char*)NULL, environ);
  else if (!strcmp(mode, "vfork")) {
    int err = 0;
    pid_t pid = vfork();
    if (pid == 0) {
      execve(file, args, environ);
      _exit(errno == ENOENT ? 101 : errno == EACCES ? 102 : errno == ENOTDIR ? 103 : 104);
    }
    if (pid < 0) return fail(errno);
    int rc = wait_child(pid);
    if (rc >= 101 && rc <= 104) err = rc == 101 ? ENOENT : rc == 102 ? EACCES : ENOTDIR;
    return err ? fail(err) : rc;
  } else if (!strcmp(mode, "posix_spawn") || !strcmp(mode, "posix_spawnp")) {
    pid_t pid;
    int rc = mode[11] == 'p' ? posix_spawnp(&pid, file, NULL, NULL, args, environ)
                             : posix_spawn(&pid, file, NULL, NULL, args, environ);
    if (rc != 0) return fail(rc);
    return wait_child(pid);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return fail(errno);
}
