typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
__attribute__((target("arch=x86-64-v4"))) v16f dot16(const v16f *a, const v16f *b, int n) {
    v16f acc = {0}; for (int i = 0; i < n; i++) acc += a[i] * b[i]; return acc; }
__attribute__((target("arch=x86-64-v4"))) v8f dot8(const v8f *a, const v8f *b, int n) {
    v8f acc = {0}; for (int i = 0; i < n; i++) acc += a[i] * b[i]; return acc; }
