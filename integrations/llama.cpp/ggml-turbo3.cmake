# Adds the turbo3 glue (ggml-turbo3.cu) to ggml's CUDA or HIP backend. Included by the patched
# ggml/src/ggml-cuda/CMakeLists.txt (and ggml-hip's) before the backend library is added:
#
#   turbo3_ggml_glue(<list of the backend's sources> <directory of ggml-cuda's sources>)
#
# It appends the glue to the source list and gives the glue and the patched ggml files (fattn.cu,
# set-rows.cu, turbo-wht.cu, ggml-cuda.cu, which call the hooks, and the glue itself) the include
# directories and the definition GGML_CUDA_TURBO3 they need. No other ggml file changes, so a
# compiler cache keeps every other object of an unpatched build.

get_filename_component(TURBO3_GLUE_DIR "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
get_filename_component(TURBO3_ROOT_DIR "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

function(turbo3_ggml_glue sources_var cuda_dir)
    set(glue "${TURBO3_GLUE_DIR}/ggml-turbo3.cu")
    set(hooked "${cuda_dir}/fattn.cu" "${cuda_dir}/set-rows.cu" "${cuda_dir}/turbo-wht.cu" "${cuda_dir}/ggml-cuda.cu")
    set_source_files_properties(${glue} ${hooked} PROPERTIES
        INCLUDE_DIRECTORIES "${TURBO3_GLUE_DIR};${TURBO3_ROOT_DIR}/include;${cuda_dir}"
        COMPILE_DEFINITIONS GGML_CUDA_TURBO3)
    if (CMAKE_CUDA_COMPILER)
        # The library's constexpr helpers run in device code; sm_90a builds also get its warpgroup
        # prefill kernels (the host pass cannot see the device passes' targets by itself).
        set(glue_options --expt-relaxed-constexpr)
        set(glue_definitions GGML_CUDA_TURBO3)
        if ("${CMAKE_CUDA_ARCHITECTURES}" MATCHES "90a")
            list(APPEND glue_definitions TURBO3_WARPGROUP_MMA_BUILT)
        endif()
        set_source_files_properties(${glue} PROPERTIES
            COMPILE_OPTIONS "${glue_options}"
            COMPILE_DEFINITIONS "${glue_definitions}")
    endif()
    set(${sources_var} ${${sources_var}} ${glue} PARENT_SCOPE)
    message(STATUS "turbo3: FLASH_ATTN_EXT over turbo3 caches runs through ${TURBO3_ROOT_DIR}")
endfunction()
