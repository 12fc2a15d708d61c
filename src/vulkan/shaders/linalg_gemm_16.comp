// linalg_gemm_16.comp — AG__K_GEMM in tiles of 16 x 16 outputs, 1 x 1 per invocation (linalg_gemm.glsl).
#version 460
#extension GL_GOOGLE_include_directive : require
#define BM 16
#define BN 16
#define TM 1
#define TN 1
#include "linalg_gemm.glsl"
