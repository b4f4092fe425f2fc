build-dev/obj/common/rdma_params.o: common/rdma_params.cpp \
 common/rdma_params.hpp common/ring_format.hpp
common/rdma_params.hpp:
common/ring_format.hpp:
