// The rdmasock command: one subcommand per file, dispatched by main.cpp.
#pragma once

namespace rdmasock::cli {

// argv[0] is the subcommand name; each returns the process exit status.
int cmd_run(int argc, char** argv);     // run.cpp: exec a program with the preload
int cmd_stat(int argc, char** argv);    // stat.cpp: live shimmed connections on this host
int cmd_doctor(int argc, char** argv);  // doctor.cpp: what works on this host, what to fix

}  // namespace rdmasock::cli
