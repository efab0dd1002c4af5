# cmp.py NAME [--ref]: outputs of /tmp/cw/NAME (forward), NAME_dec (GQA, few queries), NAME_bwd (dq, dk, dv)
# against ref/ bit for bit; --ref writes ref/ instead. Prints the max ulp difference where they differ.
import os, subprocess, sys
import numpy as np
name, ref = sys.argv[1], '--ref' in sys.argv
os.chdir('/tmp/cw')
out = 'ref' if ref else 'out_' + name
os.makedirs(out, exist_ok=True)
cases = []
for N in (84, 130, 200, 1024):
    for d in (40, 64, 128, 256):
        for c in (0, 1):
            cases.append(('', [N, d, c], {}))
for N, d in ((200, 64), (130, 128)):
    for c in (0, 1):
        cases.append(('', [N, d, c], {'SCALE': '2.5'}))
for G, NQ, N, d in ((8, 1, 4096, 64), (8, 4, 1000, 128), (4, 3, 777, 40), (2, 5, 300, 256), (16, 2, 513, 64)):
    for c in (0, 1):
        cases.append(('_dec', [N, d, c], {'G': str(G), 'NQ': str(NQ)}))
cases.append(('_dec', [300, 64, 0], {'G': '8', 'NQ': '1', 'SCALE': '3'}))
for N, d in ((130, 40), (200, 64), (256, 128), (100, 256)):
    for c in (0, 1):
        cases.append(('_bwd', [N, d, c, 2], {}))
cases.append(('_bwd', [200, 64, 1, 2], {'SCALE': '2.5'}))
for N, d in ((130, 64), (256, 128)):
    cases.append(('', [N, d, 1], {'SOFTCAP': '0.7'}))
    cases.append(('_bwd', [N, d, 1, 2], {'SOFTCAP': '0.7'}))
cases.append(('_dec', [500, 64, 0], {'G': '8', 'NQ': '2', 'SOFTCAP': '0.5'}))
same = 0
for exe, args, env in cases:
    tag = exe + '_' + '_'.join(map(str, args)) + ''.join(f'_{k}{v}' for k, v in env.items())
    f = f'{out}/{tag}.bin'
    r = subprocess.run([f'./{name}{exe}'] + list(map(str, args)), env=dict(os.environ, OUTF=f, REPS='1', **env),
                       check=True, stdout=subprocess.PIPE, text=True)
    assert 'status 0 ' in r.stdout, (tag, r.stdout)
    if ref:
        continue
    a, b = np.fromfile(f'ref/{tag}.bin', np.float32), np.fromfile(f, np.float32)
    if a.tobytes() == b.tobytes():
        same += 1
        continue
    ai, bi = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    print(f'DIFF {tag}: {np.count_nonzero(a != b)} of {a.size} differ, max {np.abs(ai - bi).max()} ulp')
if not ref:
    print(f'{same} of {len(cases)} cases the same bits')
