// Faults planted in the emulator on purpose, one per build, chosen with
// -DFA_EMU_PLANT=<value> (emu.load(..., defines=("FA_EMU_PLANT=1",))).
// test_mlx_plants.py builds MLX's own kernels, which are right on Apple
// GPUs, with each fault and requires that they then fail: so the tests
// that run them unplanted check the emulator's model of these primitives.
#pragma once

// simdgroup_matrix's fragment layout (frag_coord) is another valid one:
// each lane still holds two adjacent elements of a row, every element held
// once, but row-major by lane (lane l: row l / 4, columns 2 (l % 4) + 0, 1)
// instead of MLX's.
#define FA_EMU_PLANT_FRAGMENT_LAYOUT 1
// simd_shuffle_xor pairs the wrong lanes: lane i reads lane
// (i + mask) % 32 instead of i ^ mask (the same for half the lanes).
#define FA_EMU_PLANT_SHUFFLE_XOR_LANES 2
// threadgroup_barrier does not wait for the other threads.
#define FA_EMU_PLANT_BARRIER_NO_WAIT 3

#ifndef FA_EMU_PLANT
#define FA_EMU_PLANT 0
#endif
