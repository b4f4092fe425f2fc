build-dev/obj/common/rdma_setup.o: common/rdma_setup.cpp \
 common/rdma_setup.hpp common/config.hpp common/log.hpp \
 common/peer_rules.hpp common/transport.hpp common/ring_reader.hpp \
 common/record_sink.hpp common/ring_format.hpp common/ring_io.hpp \
 common/ring_writer.hpp common/handshake.hpp common/rdma_device.hpp \
 common/rdma_params.hpp common/rdma_transport.hpp
common/rdma_setup.hpp:
common/config.hpp:
common/log.hpp:
common/peer_rules.hpp:
common/transport.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/handshake.hpp:
common/rdma_device.hpp:
common/rdma_params.hpp:
common/rdma_transport.hpp:
