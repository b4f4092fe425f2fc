build-dev/obj/common/shm_segment.o: common/shm_segment.cpp \
 common/shm_segment.hpp common/shm_sweep.hpp
common/shm_segment.hpp:
common/shm_sweep.hpp:
