build-dev/obj/benchmarks/spin_sweep.o: benchmarks/spin_sweep.cpp \
 benchmarks/pingpong_stats.hpp
benchmarks/pingpong_stats.hpp:
