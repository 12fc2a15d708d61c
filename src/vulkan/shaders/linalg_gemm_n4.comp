// linalg_gemm_n4.comp — AG__K_GEMM in tiles of 64 x 4 outputs, 1 x 1 per invocation (linalg_gemm.glsl).
#version 460
#extension GL_GOOGLE_include_directive : require
#define BM 64
#define BN 4
#define TM 1
#define TN 1
#include "linalg_gemm.glsl"
