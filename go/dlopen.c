/* Run-time loading of libzarena for the zarena_dlopen build mode (see dlopen.h). Compiled
 * in every mode; empty unless ZARENA_GO_DLOPEN is defined. */
#include "dlopen.h"

#ifdef ZARENA_GO_DLOPEN

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZARENA_GO_DL_DEFINE(name) __typeof__(name)* zarena_go_dl_##name = NULL;
ZARENA_GO_DL_FUNCTIONS(ZARENA_GO_DL_DEFINE)
ZARENA_GO_DL_OPTIONAL(ZARENA_GO_DL_DEFINE)
#undef ZARENA_GO_DL_DEFINE

static pthread_mutex_t zarena_go_dl_mu = PTHREAD_MUTEX_INITIALIZER;
static void* zarena_go_dl_handle = NULL;
static char zarena_go_dl_path[4096];

/* The version node each function was added in (a program that needs a 1.1 function
 * refuses an older library, as a linked program would). */
static const char* zarena_go_dl_missing(void* h) {
#define ZARENA_GO_DL_LOOKUP(name)                                         \
  zarena_go_dl_##name = (__typeof__(zarena_go_dl_##name))dlsym(h, #name); \
  if (zarena_go_dl_##name == NULL) return #name;
  ZARENA_GO_DL_FUNCTIONS(ZARENA_GO_DL_LOOKUP)
#undef ZARENA_GO_DL_LOOKUP
#define ZARENA_GO_DL_OPTIONAL_LOOKUP(name) \
  zarena_go_dl_##name = (__typeof__(zarena_go_dl_##name))dlsym(h, #name);
  ZARENA_GO_DL_OPTIONAL(ZARENA_GO_DL_OPTIONAL_LOOKUP)
#undef ZARENA_GO_DL_OPTIONAL_LOOKUP
  return NULL;
}

static char* zarena_go_dl_format(const char* fmt, const char* a, const char* b) {
  size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
  char* s = (char*)malloc(n);
  if (s != NULL) snprintf(s, n, fmt, a, b);
  return s;
}

int zarena_go_dl_load(const char* path, const char** err, int* err_owned,
                      const char** loaded_from) {
  *err = NULL;
  *err_owned = 0;
  *loaded_from = NULL;
  pthread_mutex_lock(&zarena_go_dl_mu);
  if (zarena_go_dl_handle != NULL) {
    *loaded_from = zarena_go_dl_path;
    pthread_mutex_unlock(&zarena_go_dl_mu);
    return 1;
  }
  /* One candidate: an explicit path, else $ZARENA_LIBRARY, else the runtime name. A
   * wrong explicit choice is reported, never replaced by another library. */
  const char* env = getenv("ZARENA_LIBRARY");
  const char* candidate = path != NULL && path[0] != '\0' ? path
                          : env != NULL && env[0] != '\0' ? env
                                                          : "libzarena.so.1";
  char* why = NULL;
  void* h = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char* e = dlerror();
    why = zarena_go_dl_format("cannot load %s: %s", candidate, e != NULL ? e : "?");
  } else {
    const char* missing = zarena_go_dl_missing(h);
    if (missing == NULL) {
      zarena_go_dl_handle = h;
      snprintf(zarena_go_dl_path, sizeof zarena_go_dl_path, "%s", candidate);
      *loaded_from = zarena_go_dl_path;
      pthread_mutex_unlock(&zarena_go_dl_mu);
      return 1;
    }
    why = zarena_go_dl_format("%s lacks %s: it is older than the zarena 1.1 this package needs",
                              candidate, missing);
    dlclose(h);
  }
  pthread_mutex_unlock(&zarena_go_dl_mu);
  if (why != NULL) {
    *err = why;
    *err_owned = 1;
  } else {
    *err = "no library to load";
  }
  return 0;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int zarena_go_dl_unused;
#endif
