# tools/latency.cmake - rmacoll-latency (tools/latency.c) needs the CUDA
# runtime; without CUDA it builds as a stub that says so.
if(TARGET rmacoll-latency AND RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_link_libraries(rmacoll-latency PRIVATE CUDA::cudart Threads::Threads)
  target_compile_definitions(rmacoll-latency PRIVATE RMACOLL_LATENCY_HAVE_CUDA=1)
endif()
