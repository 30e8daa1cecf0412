/* Logging. Libraries log only through here, and only at debug/info level for
 * diagnostics; errors travel as struct cerr. The main() of each binary picks
 * the level and the sink (stderr by default). */
#ifndef CELL_LOG_H
#define CELL_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_init(const char *prog, enum log_level level);
void log_set_fd(int fd);
enum log_level log_get_level(void);
const char *log_get_prog(void);
int log_get_fd(void);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
