#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
static inline v16f vselect(v16i mask, v16f a, v16f b) { return (v16f)(((v16i)a & mask) | ((v16i)b & ~mask)); }
static inline v16f vmax(v16f a, v16f b) { return vselect(a > b, a, b); }

/* 2^x for x <= 0, to ~1 ulp: x = n + f with n an integer and |f| <= 1/2;
 * 2^f from its Taylor series to degree 7 (truncation error < 5e-9), 2^n put
 * straight into the exponent bits. x below −126 (and −inf) gives 0; NaN stays
 * NaN, so a NaN score poisons its row as it does in SDPA. */
static inline v16f exp2_neg(v16f x)
{
    const v16i tiny = x < -126.0f;
    const v16f xc = vselect(tiny, (v16f){0} - 126.0f, x);
    const v16f xn = vselect(xc == xc, xc, (v16f){0});              /* n from a number, never NaN */
    const v16i n = __builtin_convertvector(xn - 0.5f, v16i);       /* truncation = nearest, as x <= 0 */
    const v16f y = (xc - __builtin_convertvector(n, v16f)) * 0.6931471805599453f;
    v16f t = y * (1.0f / 5040.0f) + 1.0f / 720.0f;
    t = t * y + 1.0f / 120.0f;
    t = t * y + 1.0f / 24.0f;
    t = t * y + 1.0f / 6.0f;
    t = t * y + 0.5f;
    t = t * y + 1.0f;
    t = t * y + 1.0f;                                               /* e^y = 2^f */
    const v16f pow2n = (v16f)((n + 127) << 23);
    return vselect(tiny, (v16f){0}, t * pow2n);
}

/* tanh(x), within 3 ulp of tanhf: |x| < 0.4 by its odd Taylor series to x^13 (the next term is
 * below 1e-8 of the result); beyond, (1 − e) / (1 + e) with e = e^(−2|x|) ≤ 0.45 (no cancellation),
 * the sign put back. NaN stays NaN, ±inf gives ±1. */
static inline v16f tanh16(v16f x)
{
    const v16i sign = (v16i)x & INT32_MIN;
    const v16f a = (v16f)((v16i)x ^ sign), a2 = a * a;
    v16f t = a2 * (21844.0f / 6081075.0f) - 1382.0f / 155925.0f;
    t = t * a2 + 62.0f / 2835.0f;
    t = t * a2 - 17.0f / 315.0f;
    t = t * a2 + 2.0f / 15.0f;
    t = t * a2 - 1.0f / 3.0f;
    const v16f e = exp2_neg(a * (-2.0f * 1.4426950408889634f));
    const v16f r = vselect(a < 0.4f, a + a * a2 * t, (1.0f - e) / (1.0f + e));
    return (v16f)((v16i)r | sign);
}


int main(void){
  double maxulp=0; float worst=0; long n=0;
  for (float x=-20.f; x<=20.f; x = nextafterf(x, 30.f)) {
    if (fabsf(x) > 1e-3f && ((n++) % 7)) continue;   /* all near 0, a sample elsewhere */
    v16f v; for(int i=0;i<16;i++) v[i]=x;
    float r = tanh16(v)[0];
    double ref = tanh((double)x);
    double ulp = fabs(r - ref) / (nextafterf((float)fabs(ref), INFINITY) - (float)fabs(ref));
    if (ulp > maxulp) { maxulp = ulp; worst = x; }
  }
  v16f sp = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-30f, -1e-30f, 0.39999f, 0.4f, -0.4f, 9.0f, 1e-45f};
  v16f r = tanh16(sp);
  printf("max ulp %.2f at %g\n", maxulp, worst);
  for (int i=0;i<12;i++) printf("%g -> %g (tanhf %g)\n", sp[i], r[i], tanhf(sp[i]));
  return 0;
}
