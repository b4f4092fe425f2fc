// rdmasock stat: the live shimmed connections on this host, read from each
// process's stat page (common/stat_page.hpp). The kernel's /proc permission
// check decides what a user may see: their own processes, or all for root.
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "stat/stat_page.hpp"

namespace rdmasock::cli {

namespace {

struct ProcessPage {
    int pid = 0;
    std::string command;
    stat::PageView view;
};

const std::string kLinkName = std::string("/memfd:") + stat::kMemfdName + " (deleted)";

// The owner may truncate its memfd under our mapping: a SIGBUS then skips that process.
sigjmp_buf g_jump;
volatile sig_atomic_t g_guarded = 0;
void on_fault(int sig) {
    if (g_guarded) siglongjmp(g_jump, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

bool all_digits(const char* s) {
    if (!*s) return false;
    for (; *s; ++s)
        if (*s < '0' || *s > '9') return false;
    return true;
}

std::string read_comm(int pid) {
    std::string path = "/proc/" + std::to_string(pid) + "/comm";
    FILE* f = fopen(path.c_str(), "re");
    if (!f) return "?";
    char buf[64] = "";
    if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
    fclose(f);
    std::string s;
    for (char* p = buf; *p && *p != '\n'; ++p) s += (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    return s;
}

// Maps and reads one candidate fd; false when it is no valid page of this process.
bool read_one(int pid, const std::string& fd_path, ProcessPage& out) {
    int fd = open(fd_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(stat::kHeaderBytes) &&
        st.st_size <= (off_t{1} << 32)) {
        size_t len = static_cast<size_t>(st.st_size);
        void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            std::string error;
            if (sigsetjmp(g_jump, 1) == 0) {
                g_guarded = 1;
                ok = stat::read_page(p, len, out.view, error);
            } else {
                ok = false;
            }
            g_guarded = 0;
            munmap(p, len);
        }
    }
    close(fd);
    // A page another process handed over (or a stale copy) is not this process's.
    return ok && out.view.pid == pid;
}

// Pages of one process; `denied` when the kernel would not let us look.
std::vector<ProcessPage> scan_process(int pid, bool* denied) {
    std::vector<ProcessPage> pages;
    std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = opendir(dir.c_str());
    if (!d) {
        if (denied) *denied = errno == EACCES || errno == EPERM;
        return pages;
    }
    std::set<std::pair<dev_t, ino_t>> seen;  // the same memfd under several fd numbers counts once
    while (dirent* e = readdir(d)) {
        if (!all_digits(e->d_name)) continue;
        std::string path = dir + "/" + e->d_name;
        char link[256];
        ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        if (kLinkName != link) continue;
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
        ProcessPage pg;
        pg.pid = pid;
        if (read_one(pid, path, pg)) pages.push_back(std::move(pg));
    }
    closedir(d);
    if (!pages.empty()) {
        std::string comm = read_comm(pid);
        for (auto& p : pages) p.command = comm;
    }
    return pages;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

const char* role_name(stat::Role r) { return r == stat::Role::server ? "server" : "client"; }

void print_json(const std::vector<ProcessPage>& pages) {
    std::printf("{\n  \"connections\": [");
    bool first = true;
    for (const auto& pg : pages)
        for (const auto& s : pg.view.slots) {
            std::printf(
                "%s\n    {\"pid\": %d, \"command\": %s, \"fd\": %d, \"role\": \"%s\", \"local\": %s, \"remote\": %s, "
                "\"transport\": %s, \"phase\": %s, \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"reason\": %s}",
                first ? "" : ",", pg.pid, json_string(pg.command).c_str(), s.fd, role_name(s.role),
                json_string(s.local).c_str(), json_string(s.remote).c_str(), json_string(s.transport).c_str(),
                json_string(s.phase).c_str(), static_cast<unsigned long long>(s.tx_bytes),
                static_cast<unsigned long long>(s.rx_bytes), json_string(s.reason).c_str());
            first = false;
        }
    std::printf("%s],\n  \"processes\": [", first ? "" : "\n  ");
    first = true;
    for (const auto& pg : pages) {
        std::printf("%s\n    {\"pid\": %d, \"command\": %s, \"connections\": %zu, \"slots\": %u, \"dropped\": %llu}",
                    first ? "" : ",", pg.pid, json_string(pg.command).c_str(), pg.view.slots.size(),
                    pg.view.slot_count, static_cast<unsigned long long>(pg.view.dropped));
        first = false;
    }
    std::printf("%s]\n}\n", first ? "" : "\n  ");
}

void print_table(const std::vector<ProcessPage>& pages) {
    std::printf("%-7s %-15s %-5s %-6s %-22s %-22s %-9s %-11s %12s %12s %s\n", "PID", "COMMAND", "FD", "ROLE", "LOCAL",
                "REMOTE", "TRANSPORT", "PHASE", "TX_BYTES", "RX_BYTES", "REASON");
    for (const auto& pg : pages)
        for (const auto& s : pg.view.slots)
            std::printf("%-7d %-15s %-5d %-6s %-22s %-22s %-9s %-11s %12llu %12llu %s\n", pg.pid, pg.command.c_str(),
                        s.fd, role_name(s.role), s.local.c_str(), s.remote.c_str(), s.transport.c_str(),
                        s.phase.c_str(), static_cast<unsigned long long>(s.tx_bytes),
                        static_cast<unsigned long long>(s.rx_bytes), s.reason.empty() ? "-" : s.reason.c_str());
    for (const auto& pg : pages)
        if (pg.view.dropped)
            std::fprintf(stderr, "rdmasock stat: pid %d: %llu connection(s) not listed (all %u slots were taken)\n",
                         pg.pid, static_cast<unsigned long long>(pg.view.dropped), pg.view.slot_count);
}

int usage(FILE* to, int status) {
    std::fputs("usage: rdmasock stat [-p PID] [--json]\n"
               "Lists the live connections of shimmed processes this user may inspect (root: all).\n",
               to);
    return status;
}

}  // namespace

int cmd_stat(int argc, char** argv) {
    int only_pid = 0;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json") {
            json = true;
        } else if (a == "-p" || a == "--pid") {
            if (i + 1 >= argc || !all_digits(argv[i + 1]) || std::strlen(argv[i + 1]) > 9) return usage(stderr, 2);
            only_pid = std::atoi(argv[++i]);
        } else if (a == "-h" || a == "--help") {
            return usage(stdout, 0);
        } else {
            std::fprintf(stderr, "rdmasock stat: unknown argument '%s'\n", a.c_str());
            return usage(stderr, 2);
        }
    }
    struct sigaction sa {};
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);

    std::vector<ProcessPage> pages;
    if (only_pid) {
        if (access(("/proc/" + std::to_string(only_pid)).c_str(), F_OK) != 0) {
            std::fprintf(stderr, "rdmasock stat: no process %d\n", only_pid);
            return 1;
        }
        bool denied = false;
        pages = scan_process(only_pid, &denied);
        if (denied) {
            std::fprintf(stderr, "rdmasock stat: pid %d: permission denied (run as its user or as root)\n", only_pid);
            return 1;
        }
    } else {
        DIR* d = opendir("/proc");
        if (!d) {
            std::perror("rdmasock stat: /proc");
            return 1;
        }
        std::vector<int> pids;
        while (dirent* e = readdir(d))
            if (all_digits(e->d_name) && std::strlen(e->d_name) < 10) pids.push_back(std::atoi(e->d_name));
        closedir(d);
        std::sort(pids.begin(), pids.end());
        for (int pid : pids)
            for (auto& pg : scan_process(pid, nullptr)) pages.push_back(std::move(pg));
    }
    if (json) print_json(pages);
    else print_table(pages);
    return 0;
}

}  // namespace rdmasock::cli
