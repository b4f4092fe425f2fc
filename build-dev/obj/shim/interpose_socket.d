build-dev/obj/shim/interpose_socket.o: shim/interpose_socket.cpp \
 common/log.hpp common/offer_policy.hpp common/config.hpp \
 common/peer_rules.hpp common/handshake.hpp shim/real_calls.hpp \
 common/connection.hpp common/shm_rendezvous.hpp common/peer_check.hpp \
 common/transport.hpp common/ring_reader.hpp common/record_sink.hpp \
 common/ring_format.hpp common/ring_io.hpp common/ring_writer.hpp \
 common/spin_policy.hpp shim/epoll_sets.hpp common/registry.hpp \
 shim/shim_state.hpp shim/fd_table.hpp
common/log.hpp:
common/offer_policy.hpp:
common/config.hpp:
common/peer_rules.hpp:
common/handshake.hpp:
shim/real_calls.hpp:
common/connection.hpp:
common/shm_rendezvous.hpp:
common/peer_check.hpp:
common/transport.hpp:
common/ring_reader.hpp:
common/record_sink.hpp:
common/ring_format.hpp:
common/ring_io.hpp:
common/ring_writer.hpp:
common/spin_policy.hpp:
shim/epoll_sets.hpp:
common/registry.hpp:
shim/shim_state.hpp:
shim/fd_table.hpp:
