build-dev/obj/common/shm_rendezvous.o: common/shm_rendezvous.cpp \
 common/shm_rendezvous.hpp common/peer_check.hpp common/transport.hpp \
 common/ring_reader.hpp common/record_sink.hpp common/ring_format.hpp \
 common/ring_io.hpp common/ring_writer.hpp common/log.hpp \
 common/shm_transport.hpp common/shm_channel.hpp common/memfd_segment.hpp \
 common/shm_segment.hpp common/side_channel.hpp
common/shm_rendezvous.hpp:
common/peer_check.hpp:
common/transport.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/log.hpp:
common/shm_transport.hpp:
common/shm_channel.hpp:
common/memfd_segment.hpp:
common/shm_segment.hpp:
common/side_channel.hpp:
