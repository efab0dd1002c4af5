# tanh16 (csrc/fa_cpu.c) against fp64 tanh: the largest error in float ulps over [-20, 20] (every
# float near 0, a sample elsewhere) and the special values. Extracts the vector helpers from
# fa_cpu.c as of 1d30efc (git show; tanh16 has since moved into fa_lanes.h) into a small C program,
# builds it with gcc for x86-64-v4 and runs it (an AVX-512 CPU).
#   python3 bench/log/2026-12-06-amx/tanh16_check.py     (output: tanh16_check.txt)
import os
import subprocess
import tempfile

src = subprocess.run(["git", "show", "1d30efc:csrc/fa_cpu.c"], check=True, capture_output=True, text=True,
                     cwd=os.path.dirname(os.path.abspath(__file__))).stdout
body = src[src.index("static inline v16f vselect"):src.index("/* dst[x] = tanh(src[x]")]
prog = r'''#include <stdint.h>
#include <math.h>
#include <stdio.h>
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
''' + body + r'''
int main(void)
{
    double maxulp = 0;
    float worst = 0;
    long n = 0;
    for (float x = -20.f; x <= 20.f; x = nextafterf(x, 30.f)) {
        if (fabsf(x) > 1e-3f && (n++) % 7)
            continue;
        v16f v;
        for (int i = 0; i < 16; i++)
            v[i] = x;
        const float r = tanh16(v)[0];
        const double ref = tanh((double)x);
        const double ulp = fabs(r - ref) / (nextafterf((float)fabs(ref), INFINITY) - (float)fabs(ref));
        if (ulp > maxulp)
            maxulp = ulp, worst = x;
    }
    v16f sp = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-30f, -1e-30f, 0.39999f, 0.4f, -0.4f, 9.0f, 1e-45f};
    v16f r = tanh16(sp);
    printf("max ulp %.2f at %g\n", maxulp, worst);
    for (int i = 0; i < 12; i++)
        printf("%g -> %g (tanhf %g)\n", sp[i], r[i], tanhf(sp[i]));
    return 0;
}
'''
with tempfile.TemporaryDirectory() as d:
    c, exe = os.path.join(d, "t.c"), os.path.join(d, "t")
    open(c, "w").write(prog)
    subprocess.run(["gcc", "-O2", "-march=x86-64-v4", "-std=c11", c, "-lm", "-o", exe], check=True)
    subprocess.run([exe], check=True)
