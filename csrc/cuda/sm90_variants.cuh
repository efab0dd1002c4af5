/*
 * sm90_variants.cuh — the Hopper kernel's VAR instantiations (sm90.cu): their arguments and the O
 * store of packed sequences. The steps
 * themselves (each thread's rows, the per-score variants, the key blocks a tile reads) are shared
 * with the sm_80 kernel in variants.cuh; sm90.cu includes this after its kernel arguments
 * (sm90_args). The plain kernels use none of it.
 */
#ifndef FA_SM90_VARIANTS_CUH
#define FA_SM90_VARIANTS_CUH

#include "variants.cuh"

/* A VAR launch: sm90_args and the resolved variants. */
struct sm90_var_args : sm90_args {
    CUtensorMap tm_mask;                /* sm90_tile_mask: attn_mask (key, row, head, batch), box 64 × BM */
    fa_var var;
    int key_rows;                       /* key_mask's ranges after the shared struct (var_keys_rows) */
    int mask_h, mask_b;                 /* tm_mask has a head / batch dimension (else broadcast: 0) */
    int *tile_counter;                  /* packed sequences: the walk's counter (packed_find), or NULL */
};

/* The kernel's argument type: sm90_args, or with variants (VAR: FA_VAR_MASKS, FA_VAR_ALL) sm90_var_args. */
template <int VAR>
struct sm90_kargs {
    typedef sm90_var_args type;
};
template <>
struct sm90_kargs<0> {
    typedef sm90_args type;
};

#ifdef FA_SM90_DEVICE
/* A packed call's O leaves without TMA: a 64-row TMA store would run into the next sequence's rows.
 * The warpgroup's 128 threads copy its rows row_first.. below the sequence's Nq from where they are
 * staged (s_q: the warpgroup's rows of panel 0 of the Q buffer, 128-byte swizzled panels of BM rows)
 * to o, 16 bytes at a time (o's rows are 16-byte aligned: the tensor map of o was built). */
template <int D, int BM>
__device__ __forceinline__ void var_store_rows(const fa_params &p, uint32_t s_q, const fa_var_seq &s, int64_t h,
                                               int row_first)
{
    const int d = (int)p.d, rows = min(64, s.Nq - row_first);
    uint16_t *o = (uint16_t *)p.o + h * p.o_head_stride + (s.q0 + row_first) * p.o_row_stride;
    for (int i = threadIdx.x % 128; i < 64 * (D / 8); i += 128) {
        const int rr = i / (D / 8), c = i % (D / 8), n = min(8, d - 8 * c);
        if (rr >= rows || n <= 0)
            continue;
        const uint4 x = ld_shared_v4(s_q + (c / 8) * (BM * 128) + rr * 128 + (((c % 8) ^ (rr % 8)) << 4));
        uint16_t *dst = o + rr * p.o_row_stride + 8 * c;
        if (n == 8) {
            *reinterpret_cast<uint4 *>(dst) = x;
        } else {
            const uint32_t w[4] = {x.x, x.y, x.z, x.w};
            for (int e = 0; e < n; e++)
                dst[e] = (uint16_t)(w[e / 2] >> (16 * (e % 2)));
        }
    }
}
#endif

#endif /* FA_SM90_VARIANTS_CUH */
