// linalg_gemm_64.comp — AG__K_GEMM in tiles of 64 x 64 outputs, 4 x 4 per invocation (linalg_gemm.glsl).
#version 460
#extension GL_GOOGLE_include_directive : require
#define BM 64
#define BN 64
#define TM 4
#define TN 4
#include "linalg_gemm.glsl"
