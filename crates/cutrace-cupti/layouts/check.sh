#!/bin/sh
# Prints the layouts of the CUPTI structs src/sys.rs declares (profiler, Range Profiler, PM and PC
# Sampling, the memory activity records), from NVIDIA's headers, to compare with its const asserts. Usage: check.sh <dir holding cupti_*.h>, e.g. the include/ of the
# nvidia-cuda-cupti==13.0.* wheel (`pip download --no-deps 'nvidia-cuda-cupti==13.0.*'`, unzip).
# cuda.h is not in that wheel; the driver types the headers name are declared here (opaque where
# no checked struct holds one by value).
set -eu
inc=${1:?usage: check.sh <cupti include dir>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/cuda.h" <<'H'
#pragma once
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef enum { CUDA_SUCCESS = 0 } CUresult;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUgraphNodeType;
typedef int CUdevice_attribute;
typedef int CUstreamAttrID;
typedef struct { char bytes[16]; } CUuuid;
typedef struct { void *base_ptr; } CUaccessPolicyWindow;
typedef union { CUaccessPolicyWindow accessPolicyWindow; } CUstreamAttrValue;
H
: > "$tmp/builtin_types.h"
here=$(dirname "$0")
c++ -std=c++17 -I"$tmp" -I"$inc" "$here/layouts.cpp" -o "$tmp/layouts"
grep -h "define CUPTI_API_VERSION " "$inc/cupti_version.h"
"$tmp/layouts"
