build-dev/obj/tests/programs/readiness_check.o: \
 tests/programs/readiness_check.cpp
