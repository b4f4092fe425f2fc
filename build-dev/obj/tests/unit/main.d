build-dev/obj/tests/unit/main.o: tests/unit/main.cpp
