build-dev/obj/shim/interpose_io.o: shim/interpose_io.cpp \
 shim/real_calls.hpp common/connection.hpp common/config.hpp \
 common/log.hpp common/peer_rules.hpp common/handshake.hpp \
 common/shm_rendezvous.hpp common/peer_check.hpp common/transport.hpp \
 common/ring_reader.hpp common/record_sink.hpp common/ring_format.hpp \
 common/ring_io.hpp common/ring_writer.hpp common/spin_policy.hpp \
 shim/shim_state.hpp shim/fd_table.hpp
shim/real_calls.hpp:
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
shim/shim_state.hpp:
shim/fd_table.hpp:
