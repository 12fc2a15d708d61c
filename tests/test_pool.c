/* test_pool.c — the helper threads (core/pool.c): every task of a job runs
 * once, task 0 on the caller, jobs after the helpers have gone to
 * sleep, nested and concurrent jobs (run alone by their caller). The pool
 * is started with 4 threads (AGRL_THREADS), more than the cores of some
 * machines that run these tests. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "agt.h"
#include "core/internal.h"

#define MAX_TASKS 64

typedef struct job {
  atomic_int runs[MAX_TASKS];
  pthread_t thread[MAX_TASKS];
  atomic_int order;     /* tasks started so far */
  int first[MAX_TASKS]; /* the order in which task i started */
} job;

static void count_task(void *arg, int i) {
  job *j = arg;
  j->first[i] = atomic_fetch_add(&j->order, 1);
  j->thread[i] = pthread_self();
  atomic_fetch_add(&j->runs[i], 1);
}

static void job_reset(job *j) {
  for (int i = 0; i < MAX_TASKS; i++) atomic_store(&j->runs[i], 0);
  atomic_store(&j->order, 0);
}

/* Every task of job j (n tasks) ran once; task 0 on this thread. */
static void check_job(job *j, int n, const char *what) {
  for (int i = 0; i < n; i++)
    if (atomic_load(&j->runs[i]) != 1)
      fail_msg("%s: task %d of %d ran %d times", what, i, n, atomic_load(&j->runs[i]));
  for (int i = n; i < MAX_TASKS; i++)
    if (atomic_load(&j->runs[i]) != 0) fail_msg("%s: task %d past the job's %d ran", what, i, n);
  if (!pthread_equal(j->thread[0], pthread_self())) fail_msg("%s: task 0 did not run on the caller", what);
}

static void every_task_runs_once_and_task_0_on_the_caller(void **state) {
  (void)state;
  assert_int_equal(ag__pool_threads(), 4);
  static job j;
  char what[64];
  for (int round = 0; round < 20; round++)
    for (int n = 0; n <= 40; n++) {
      job_reset(&j);
      ag__pool_run(n, count_task, &j);
      snprintf(what, sizeof what, "round %d, %d tasks", round, n);
      if (n > 0)
        check_job(&j, n, what);
      else
        assert_int_equal(atomic_load(&j.order), 0);
    }
}

static void sleep_ms(int ms) {
  struct timespec t = {0, ms * 1000000L};
  nanosleep(&t, NULL);
}

/* The helpers look for a job for AGRL_SPIN_US (50 us), then sleep: a job
 * that comes later wakes them, and its caller does not wait for them. */
static void jobs_after_the_helpers_sleep_run_every_task(void **state) {
  (void)state;
  static job j;
  for (int round = 0; round < 8; round++) {
    sleep_ms(5);
    job_reset(&j);
    ag__pool_run(24, count_task, &j);
    check_job(&j, 24, "after a pause");
  }
}

/* Task 0 waits until another task has started on another thread: a
 * helper claimed it while the caller was busy. */
typedef struct wait_job {
  atomic_int others; /* tasks > 0 started on a thread other than the caller's */
  pthread_t caller;
  int waited_out;
} wait_job;

static void wait_task(void *arg, int i) {
  wait_job *w = arg;
  if (i > 0) {
    if (!pthread_equal(pthread_self(), w->caller)) atomic_fetch_add(&w->others, 1);
    return;
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (atomic_load(&w->others) == 0) {
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 20) { /* no helper took a task: fail, not hang */
      w->waited_out = 1;
      return;
    }
  }
}

static void helpers_take_tasks_while_the_caller_runs_task_0(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    if (round) sleep_ms(5); /* the helpers asleep */
    wait_job w;
    atomic_store(&w.others, 0);
    w.caller = pthread_self();
    w.waited_out = 0;
    ag__pool_run(8, wait_task, &w);
    assert_int_equal(w.waited_out, 0);
    assert_true(atomic_load(&w.others) >= 1);
  }
}

/* A task that runs a job of its own: the pool is busy, so the inner job
 * runs on the task's thread, in order. */
typedef struct nested {
  job inner[6];
  pthread_t ran_on[6];
} nested;

static void outer_task(void *arg, int i) {
  nested *o = arg;
  o->ran_on[i] = pthread_self();
  job_reset(&o->inner[i]);
  ag__pool_run(5, count_task, &o->inner[i]);
}

static void nested_jobs_run_alone_on_their_thread(void **state) {
  (void)state;
  static nested o;
  for (int round = 0; round < 20; round++) {
    ag__pool_run(6, outer_task, &o);
    for (int i = 0; i < 6; i++) {
      for (int k = 0; k < 5; k++) {
        assert_int_equal(atomic_load(&o.inner[i].runs[k]), 1);
        assert_int_equal(o.inner[i].first[k], k); /* alone: in order */
        assert_true(pthread_equal(o.inner[i].thread[k], o.ran_on[i]));
      }
    }
  }
}

/* Two threads run jobs at once: one of them at a time has the helpers,
 * the other runs its tasks alone; every task runs once either way. */
static void *job_loop(void *arg) {
  job *j = arg;
  for (int round = 0; round < 300; round++) {
    const int n = 1 + round % 33;
    job_reset(j);
    ag__pool_run(n, count_task, j);
    for (int i = 0; i < n; i++)
      if (atomic_load(&j->runs[i]) != 1) return (void *)1;
    if (!pthread_equal(j->thread[0], pthread_self())) return (void *)1;
  }
  return NULL;
}

static void concurrent_callers_each_get_their_tasks_run(void **state) {
  (void)state;
  static job a, b;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, job_loop, &a), 0);
  void *mine = job_loop(&b);
  void *theirs = (void *)1;
  pthread_join(t, &theirs);
  assert_null(mine);
  assert_null(theirs);
}

int main(int argc, char **argv) {
  setenv("AGRL_THREADS", "4", 1); /* read once, when the pool starts */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_task_runs_once_and_task_0_on_the_caller),
      cmocka_unit_test(jobs_after_the_helpers_sleep_run_every_task),
      cmocka_unit_test(helpers_take_tasks_while_the_caller_runs_task_0),
      cmocka_unit_test(nested_jobs_run_alone_on_their_thread),
      cmocka_unit_test(concurrent_callers_each_get_their_tasks_run),
  };
  return agt_run(argc, argv, "pool", tests, sizeof tests / sizeof tests[0]);
}
