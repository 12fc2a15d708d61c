/* registry.c — the environments agrl has built in, by name: the one place
 * that lists them (ag_env_create, ag_env_builtin_name). An environment of
 * another kind is one more row. The MinAtar games are listed by their
 * default task ("breakout-minatar" ...); the variants without sticky actions
 * or ramping ("breakout-minatar-nosticky" ...) are found by name. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"

static const ag__classic *const tasks[] = {&ag__cartpole, &ag__acrobot, &ag__mountaincar, &ag__pendulum,
                                           &ag__mountaincar_continuous};
enum { N_TASKS = (int)(sizeof tasks / sizeof tasks[0]), MINATAR_VARIANTS = 4 };

/* The classic tasks, then each MinAtar game's default task (the first of its four). */
const ag__classic *ag__classic_at(int i) {
  if (i >= 0 && i < N_TASKS) return tasks[i];
  const int m = (i - N_TASKS) * MINATAR_VARIANTS;
  return i >= N_TASKS && m < ag__minatar_n_tasks ? &ag__minatar_tasks[m] : NULL;
}

const ag__classic *ag__classic_find(const char *name) {
  for (int i = 0; i < N_TASKS; i++)
    if (strcmp(name, tasks[i]->name) == 0 || strcmp(name, tasks[i]->spec.id) == 0) return tasks[i];
  for (int i = 0; i < ag__minatar_n_tasks; i++)
    if (strcmp(name, ag__minatar_tasks[i].name) == 0 || strcmp(name, ag__minatar_tasks[i].spec.id) == 0)
      return &ag__minatar_tasks[i];
  return NULL;
}

void ag__classic_names(char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; ag__classic_at(i) && used < size; i++) {
    const ag__classic *c = ag__classic_at(i);
    int k = snprintf(buf + used, size - used, "%s%s (%s)", i ? ", " : "", c->name, c->spec.id);
    if (k < 0) break;
    used += (size_t)k;
  }
  if (used < size)
    snprintf(buf + used, size - used,
             "; a MinAtar game also as NAME-nosticky, NAME-noramp, NAME-nosticky-noramp");
}

const char *ag_env_builtin_name(int i) {
  const ag__classic *c = ag__classic_at(i);
  return c ? c->name : NULL;
}

ag_status ag_env_create(const char *name, ag_env **out) {
  static const char fn[] = "ag_env_create";
  if (!name) return ag__fail(AG_ERR_INVALID_ARG, "%s: name is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  const ag__classic *c = ag__classic_find(name);
  if (!c) {
    char known[1024];
    ag__classic_names(known, sizeof known);
    return ag__fail(AG_ERR_INVALID_ARG, "%s: unknown environment \"%.64s\"; known: %s", fn, name, known);
  }
  return ag__classic_create(c, fn, out);
}
