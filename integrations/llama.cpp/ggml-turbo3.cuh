// The hooks the patched ggml CUDA/HIP backend calls (the glue is ggml-turbo3.cu beside this file).
#pragma once

#include "common.cuh"

// Runs `dst` (FLASH_ATTN_EXT) through the turbo3 library and returns true, or returns false,
// having launched nothing, when the node stays on ggml's own kernels.
bool ggml_cuda_turbo3_flash_attn_ext(ggml_backend_cuda_context & ctx, ggml_tensor * dst);

// Whether ggml_cuda_turbo3_flash_attn_ext would run `dst` on `device`: the backend's supports_op
// and its buffer-size query (a served node needs none of ggml's f16 copies of K and V) ask it.
bool ggml_cuda_turbo3_serves(int device, const ggml_tensor * dst);

// Runs a turbo3 SET_ROWS (the cache write) through turbo3::write_rows and returns true, or
// returns false, having launched nothing (the route is off, InnerQ is on, or the shape is not one
// it covers).
bool ggml_cuda_turbo3_set_rows(ggml_backend_cuda_context & ctx, ggml_tensor * dst);

// Runs a TURBO_WHT node (the rotation the fork applies to Q before attention and to the output
// after it) through turbo3::rotate_groups and returns true, or returns false, having launched
// nothing (the route is off, or the node's groups are not the format's 128-value groups).
bool ggml_cuda_turbo3_turbo_wht(ggml_backend_cuda_context & ctx, ggml_tensor * dst);

// Unless GGML_TURBO3_FUSE_WHT=0: where graph node i is the fork's rotation of Q and the graph goes on
// (through nodes that launch nothing: the backend's own test, launches_nothing) to a served
// FLASH_ATTN_EXT reading it and the rotation of that node's output, runs the three as one library
// call with the rotations inside its kernels and returns how many nodes after i it covered; else
// returns 0, having launched nothing.
int ggml_cuda_turbo3_fuse_rotations(ggml_backend_cuda_context & ctx, const ggml_cgraph * graph, int i,
                                    bool (*launches_nothing)(const ggml_tensor *));

// CUDA-graph bookkeeping for the exit summary: one call per capture and per graph launch.
void ggml_cuda_turbo3_note_graph_capture();
void ggml_cuda_turbo3_note_graph_launch();
