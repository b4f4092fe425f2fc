build-dev/obj/tools/rdmasock/main.o: tools/rdmasock/main.cpp \
 tools/rdmasock/commands.hpp
tools/rdmasock/commands.hpp:
