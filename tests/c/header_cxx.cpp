// fa.h must compile as C++ too: the struct, the enums and the C entry points.
#include "fa.h"

#include <cstring>

int main()
{
    fa_params p;
    std::memset(&p, 0, sizeof(p));
    p.dtype = FA_BFLOAT16;
    int (*cpu)(const fa_params *) = fa_forward_cpu;
    int (*cuda)(const fa_params *, struct CUstream_st *) = fa_forward_cuda;
    return (cpu != nullptr && cuda != nullptr && fa_check_params(&p) != FA_OK) ? 0 : 1;
}
