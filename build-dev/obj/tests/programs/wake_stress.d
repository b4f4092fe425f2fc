build-dev/obj/tests/programs/wake_stress.o: \
 tests/programs/wake_stress.cpp
