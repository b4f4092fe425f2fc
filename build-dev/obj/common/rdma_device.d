build-dev/obj/common/rdma_device.o: common/rdma_device.cpp \
 common/rdma_device.hpp
common/rdma_device.hpp:
