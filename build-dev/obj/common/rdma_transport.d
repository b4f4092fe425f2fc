build-dev/obj/common/rdma_transport.o: common/rdma_transport.cpp \
 common/rdma_transport.hpp common/rdma_device.hpp common/rdma_params.hpp \
 common/transport.hpp common/ring_reader.hpp common/record_sink.hpp \
 common/ring_format.hpp common/ring_io.hpp common/ring_writer.hpp \
 common/rdma_qp.hpp
common/rdma_transport.hpp:
common/rdma_device.hpp:
common/rdma_params.hpp:
common/transport.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/rdma_qp.hpp:
