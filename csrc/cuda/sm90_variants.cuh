/*
 * sm90_variants.cuh — the Hopper kernel's VAR instantiations (sm90.cu): their arguments. The steps
 * themselves (each thread's rows, the per-score variants, the key blocks a tile reads) are shared
 * with the sm_80 kernel in variants.cuh; sm90.cu includes this after its kernel arguments
 * (sm90_args). The plain kernels use none of it.
 */
#ifndef FA_SM90_VARIANTS_CUH
#define FA_SM90_VARIANTS_CUH

#include "variants.cuh"

/* A VAR launch: sm90_args and the resolved variants (packed sequences are not taken). */
struct sm90_var_args : sm90_args {
    fa_var var;
};

/* The kernel's argument type: sm90_args, or with VAR sm90_var_args. */
template <bool VAR>
struct sm90_kargs {
    typedef sm90_args type;
};
template <>
struct sm90_kargs<true> {
    typedef sm90_var_args type;
};

#endif /* FA_SM90_VARIANTS_CUH */
