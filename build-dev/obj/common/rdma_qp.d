build-dev/obj/common/rdma_qp.o: common/rdma_qp.cpp common/rdma_qp.hpp \
 common/rdma_device.hpp common/rdma_params.hpp
common/rdma_qp.hpp:
common/rdma_device.hpp:
common/rdma_params.hpp:
