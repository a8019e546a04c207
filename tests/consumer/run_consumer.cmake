# Installs the library into a fresh prefix, then configures, builds and runs tests/consumer against it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${WORK_DIR}/lib;-G;${GENERATOR};-DTURBO3_BUILD_TESTS=OFF;-DTURBO3_BUILD_TOOLS=OFF;-DTURBO3_CUDA=OFF;-DCMAKE_INSTALL_PREFIX=${prefix}"
    "${CMAKE_COMMAND};--install;${WORK_DIR}/lib"
    "${CMAKE_COMMAND};-S;${SOURCE_DIR}/tests/consumer;-B;${WORK_DIR}/app;-G;${GENERATOR};-DCMAKE_PREFIX_PATH=${prefix}"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/app"
    "${WORK_DIR}/app/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer step failed (${rc}): ${step}")
  endif()
endforeach()
