// linalg_gemm_32.comp — AG__K_GEMM in tiles of 32 x 32 outputs, 2 x 2 per invocation (linalg_gemm.glsl).
#version 460
#extension GL_GOOGLE_include_directive : require
#define BM 32
#define BN 32
#define TM 2
#define TN 2
#include "linalg_gemm.glsl"
