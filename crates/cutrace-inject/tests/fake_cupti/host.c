/* A program that starts a CUPTI tool itself, as a Python program that imports torch and starts
 * torch.profiler does. Usage: host TOOL.so|- local|global STEPS
 * The tool library is dlopen'ed first (as `import torch` loads libcupti), RTLD_LOCAL or
 * RTLD_GLOBAL. STEPS, one letter each, in order:
 *   i  the CUDA driver starts the injection: dlopen($CUDA_INJECTION64_PATH), InitializeInjection
 *   s  the tool calls cuptiSubscribe
 *   r  the tool calls cuptiActivityRegisterCallbacks
 *   b  cuptiSubscribe looked up in the global scope (no libcupti loaded) and called
 *   f  fork: the child goes on with the remaining steps, the parent waits for it and stops
 *   w  waits (at most 60 s) until the file $FAKE_HOST_WAIT exists, when that is set
 * Prints each result on stdout and exits with status 3 through exit(), so atexit handlers run. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  void *tool = 0;
  if (strcmp(argv[1], "-")) {
    tool = dlopen(argv[1], RTLD_NOW | (strcmp(argv[2], "global") ? RTLD_LOCAL : RTLD_GLOBAL));
    if (!tool) { fprintf(stderr, "host: %s\n", dlerror()); return 2; }
  }
  for (const char *s = argv[3]; *s; s++) {
    if (*s == 'f') {
      fflush(stdout);
      pid_t pid = fork();
      if (pid < 0) return 2;
      if (pid > 0) {
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        break;
      }
      continue;
    }
    if (*s == 'w') {
      const char *w = getenv("FAKE_HOST_WAIT");
      for (int i = 0; w && i < 6000 && access(w, F_OK) != 0; i++) usleep(10000);
      continue;
    }
    if (*s == 'i') {
      void *inj = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_LOCAL);
      int (*init)(void) = inj ? (int (*)(void))dlsym(inj, "InitializeInjection") : 0;
      printf("init %d\n", init ? init() : -1);
    } else if (*s == 's' || *s == 'r') {
      int (*f)(void) = (int (*)(void))dlsym(tool, *s == 's' ? "tool_subscribe" : "tool_register");
      printf("%s %d\n", *s == 's' ? "subscribe" : "register", f ? f() : -1);
    } else if (*s == 'b') {
      int (*f)(void **, void *, void *) =
          (int (*)(void **, void *, void *))dlsym(RTLD_DEFAULT, "cuptiSubscribe");
      void *h = 0;
      if (f) printf("bare subscribe %d\n", f(&h, 0, 0));
      else printf("bare subscribe absent\n");
    }
    fflush(stdout);
  }
  if (tool) {
    int (*calls)(const char *) = (int (*)(const char *))dlsym(tool, "tool_calls_reaching_cupti");
    printf("libcupti saw %d cuptiSubscribe, %d cuptiActivityRegisterCallbacks, %d cuptiUnsubscribe\n",
           calls("cuptiSubscribe"), calls("cuptiActivityRegisterCallbacks"),
           calls("cuptiUnsubscribe"));
  }
  fflush(stdout);
  exit(3);
}
