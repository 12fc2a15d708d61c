/* hostmem.c — host allocations (injectable, for tests of error paths) and
 * files written under a temporary name and renamed over their target.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

/* Host allocations left before an injected failure, per thread (-1: none). */
static _Thread_local int64_t host_fault_after = -1;

void ag__host_fault_arm(int64_t after) { host_fault_after = after < 0 ? -1 : after; }
int64_t ag__host_fault_pending(void) { return host_fault_after; }

static int host_fault_fires(void) {
  if (host_fault_after < 0) return 0;
  if (host_fault_after == 0) {
    host_fault_after = -1;
    return 1;
  }
  host_fault_after--;
  return 0;
}

void *ag__malloc(size_t bytes) { return host_fault_fires() ? NULL : malloc(bytes ? bytes : 1); }

void *ag__calloc(size_t n, size_t size) {
  if (host_fault_fires()) return NULL;
  return calloc(n ? n : 1, size ? size : 1);
}

void *ag__realloc(void *p, size_t bytes) { return host_fault_fires() ? NULL : realloc(p, bytes ? bytes : 1); }

char *ag__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = ag__malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

/* ---- files replaced whole ---- */

ag_status ag__afile_open(ag__afile *a, const char *path, const char *fn) {
  memset(a, 0, sizeof *a);
  size_t n = strlen(path);
  if (n == 0) return ag__fail(AG_ERR_INVALID_ARG, "%s: the path is empty", fn);
  a->path = ag__strdup(path);
  a->tmp = ag__malloc(n + 32);
  if (!a->path || !a->tmp) {
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  static _Atomic unsigned counter;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    unsigned c = counter++;
    snprintf(a->tmp, n + 32, "%s.tmp%ld.%u", path, (long)getpid(), (c * 2654435761u) ^ (unsigned)time(NULL));
    fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    int e = errno;
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return ag__fail(AG_ERR_IO, "%s: cannot create a file beside %s: %s", fn, path, strerror(e));
  }
  a->f = fdopen(fd, "wb");
  if (!a->f) {
    int e = errno;
    close(fd);
    unlink(a->tmp);
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return ag__fail(AG_ERR_IO, "%s: cannot write beside %s: %s", fn, path, strerror(e));
  }
  return AG_OK;
}

void ag__afile_abort(ag__afile *a) {
  if (a->f) fclose(a->f);
  if (a->tmp) unlink(a->tmp);
  free(a->tmp);
  free(a->path);
  memset(a, 0, sizeof *a);
}

ag_status ag__afile_commit(ag__afile *a, const char *fn) {
  int ok = a->f && !ferror(a->f) && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
  int e = errno;
  if (a->f && fclose(a->f) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  a->f = NULL;
  if (ok && rename(a->tmp, a->path) != 0) {
    ok = 0;
    e = errno;
  }
  if (!ok) {
    char path[1024];
    snprintf(path, sizeof path, "%s", a->path);
    ag__afile_abort(a);
    return ag__fail(AG_ERR_IO, "%s: writing %s failed: %s (the file is unchanged)", fn, path, strerror(e));
  }
  free(a->tmp);
  free(a->path);
  memset(a, 0, sizeof *a);
  return AG_OK;
}

ag_status ag__stream_left(FILE *f, const char *fn, const char *name, const char *what, uint64_t *left) {
  off_t start = ftello(f), end = -1;
  if (start < 0 || fseeko(f, 0, SEEK_END) != 0 || (end = ftello(f)) < 0 || fseeko(f, start, SEEK_SET) != 0)
    return ag__fail(AG_ERR_IO, "%s: cannot find the length of %s: %s (%s is read from a file that can seek)",
                    fn, name, strerror(errno), what);
  *left = end > start ? (uint64_t)(end - start) : 0; /* positioned past its end: nothing to read */
  return AG_OK;
}

ag_status ag__open_read(const char *path, const char *fn, FILE **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return ag__fail(AG_ERR_IO, "%s: cannot open %s: %s", fn, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
    fclose(f);
    return ag__fail(AG_ERR_IO, "%s: %s is not a regular file", fn, path);
  }
  *out = f;
  return AG_OK;
}

int ag__make_dirs(const char *path) {
  char *buf = ag__strdup(path);
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  int rc = 0;
  for (char *p = buf + 1; *p && !rc; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0777) && errno != EEXIST) rc = -1;
      *p = '/';
    }
  if (!rc && mkdir(buf, 0777) && errno != EEXIST) rc = -1;
  int e = errno;
  free(buf);
  errno = e;
  return rc;
}

int ag__peek(FILE *f, void *dst, size_t n) {
  off_t at = ftello(f);
  if (at < 0) return -1;
  size_t got = fread(dst, 1, n, f);
  clearerr(f);
  if (fseeko(f, at, SEEK_SET) != 0) return -1;
  return got == n ? 0 : -1;
}

ag_status ag__afile_finish(ag__afile *a, ag_status s, int wrote, const char *fn) {
  if (!s && !wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, a->path,
                 strerror(errno));
  if (!s) return ag__afile_commit(a, fn);
  ag__afile_abort(a);
  return s;
}
