build-dev/obj/common/shm_sweep.o: common/shm_sweep.cpp \
 common/shm_sweep.hpp
common/shm_sweep.hpp:
