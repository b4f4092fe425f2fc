build-dev/obj/common/connection.o: common/connection.cpp \
 common/connection.hpp common/config.hpp common/log.hpp \
 common/peer_rules.hpp common/handshake.hpp common/shm_rendezvous.hpp \
 common/peer_check.hpp common/transport.hpp common/ring_reader.hpp \
 common/record_sink.hpp common/ring_format.hpp common/ring_io.hpp \
 common/ring_writer.hpp common/spin_policy.hpp common/rdma_setup.hpp \
 common/shm_transport.hpp common/shm_channel.hpp common/memfd_segment.hpp \
 common/shm_segment.hpp
common/connection.hpp:
common/config.hpp:
common/log.hpp:
common/peer_rules.hpp:
common/handshake.hpp:
common/shm_rendezvous.hpp:
common/peer_check.hpp:
common/transport.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/spin_policy.hpp:
common/rdma_setup.hpp:
common/shm_transport.hpp:
common/shm_channel.hpp:
common/memfd_segment.hpp:
common/shm_segment.hpp:
