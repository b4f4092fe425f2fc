build-dev/obj/tests/programs/stream_check.o: \
 tests/programs/stream_check.cpp
