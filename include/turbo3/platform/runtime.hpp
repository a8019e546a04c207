// HIP runtime names for the library's host code.
//
// - Compiled as HIP (hipcc / clang -x hip): the real HIP headers.
// - Compiled by nvcc without a HIP SDK: a thin map of the subset the library uses onto CUDA.
// - Plain C++: no runtime at all (TURBO3_HAS_RUNTIME == 0); only host code is available.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(TURBO3_USE_HIP_SDK)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define TURBO3_HAS_RUNTIME 1
#define TURBO3_PLATFORM_HIP 1
// hipStreamGetDevice: HIP 6 and later (older runtimes: the current device, device_state.hpp).
#if defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 6
#define TURBO3_HAS_STREAM_GET_DEVICE 1
#endif
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define TURBO3_HAS_RUNTIME 1
#define TURBO3_PLATFORM_CUDA 1

// The subset of HIP the library uses, mapped onto CUDA. Only names the library needs live here.
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureStatus = cudaStreamCaptureStatus;
using hipStreamCaptureMode = cudaStreamCaptureMode;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemPool_t = cudaMemPool_t;
using hipFuncAttribute = cudaFuncAttribute;
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorStreamCaptureUnsupported cudaErrorStreamCaptureUnsupported
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define hipStreamCaptureStatusInvalidated cudaStreamCaptureStatusInvalidated
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipFuncSetAttribute(f, a, v) cudaFuncSetAttribute(f, a, v)
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMallocAsync cudaMallocAsync
#define hipFreeAsync cudaFreeAsync
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipGraphInstantiate(e, g, a, b, c) cudaGraphInstantiate(e, g, 0)
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipDeviceGetDefaultMemPool cudaDeviceGetDefaultMemPool
#define hipMallocFromPoolAsync cudaMallocFromPoolAsync
#define hipErrorStreamCaptureImplicit cudaErrorStreamCaptureImplicit
#define hipThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define hipMemGetInfo cudaMemGetInfo
#define hipStreamWaitEvent cudaStreamWaitEvent
// The device of a stream: CUDA 12.8 and later (older runtimes: the current device, device_state.hpp).
#if CUDART_VERSION >= 12080
#define hipStreamGetDevice cudaStreamGetDevice
#define TURBO3_HAS_STREAM_GET_DEVICE 1
#endif
#else
#define TURBO3_HAS_RUNTIME 0
#endif
