/* env_util.c — helpers shared by the environments: the splitmix64
 * start-state generator and seed derivation, the Euler and RK4 integrators,
 * and clipping / wrapping as Gymnasium does them.
 */
#include <math.h>

#include "base/base.h"
#include "env/env_internal.h"

uint64_t ag_env_derive_seed(uint64_t seed, uint64_t index) { return ag__seed_hash(seed, index); }

ag__rng ag__rng_seeded(uint64_t seed) {
  ag__rng r = {ag_env_derive_seed(seed, 0)};
  return r;
}

uint64_t ag__rng_next(ag__rng *r) { return ag__splitmix64(&r->s); }

double ag__rng_uniform(ag__rng *r, double lo, double hi) {
  double u = ag__splitmix64_unit(&r->s);
  return lo + (hi - lo) * u;
}

void ag__euler(double *y, const double *dydt, int n, double dt) {
  for (int i = 0; i < n; i++) y[i] = y[i] + dt * dydt[i];
}

void ag__rk4(ag__deriv_fn f, const void *ctx, double *y, int n, double dt) {
  double k1[AG__MAX_ODE_DIM], k2[AG__MAX_ODE_DIM], k3[AG__MAX_ODE_DIM], k4[AG__MAX_ODE_DIM];
  double t[AG__MAX_ODE_DIM];
  const double dt2 = dt / 2.0;
  f(y, k1, ctx);
  for (int i = 0; i < n; i++) t[i] = y[i] + dt2 * k1[i];
  f(t, k2, ctx);
  for (int i = 0; i < n; i++) t[i] = y[i] + dt2 * k2[i];
  f(t, k3, ctx);
  for (int i = 0; i < n; i++) t[i] = y[i] + dt * k3[i];
  f(t, k4, ctx);
  const double w = dt / 6.0;
  for (int i = 0; i < n; i++) y[i] = y[i] + w * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

double ag__clip(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

float ag__clipf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

double ag__wrap(double x, double lo, double hi) {
  const double diff = hi - lo;
  while (x > hi) x = x - diff;
  while (x < lo) x = x + diff;
  return x;
}

double ag__pow2(double x) {
  volatile double two = 2.0;
  return pow(x, two);
}

float ag__pow2f(float x) {
  volatile float two = 2.0f;
  return powf(x, two);
}
