// linalg_gemm_m4.comp — AG__K_GEMM in tiles of 4 x 64 outputs, 1 x 1 per invocation (linalg_gemm.glsl).
#version 460
#extension GL_GOOGLE_include_directive : require
#define BM 4
#define BN 64
#define TM 1
#define TN 1
#include "linalg_gemm.glsl"
