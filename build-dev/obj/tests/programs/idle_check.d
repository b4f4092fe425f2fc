build-dev/obj/tests/programs/idle_check.o: tests/programs/idle_check.cpp
