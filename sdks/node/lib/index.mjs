// The ES module entry point (`import { Executor } from 'xjob-executor'`): the same classes as
// the CommonJS entry, so both module systems in one process share one implementation.
import executor from './index.js';

export const { Executor, JobContext, JobError, OpenNetworkRefused } = executor;
export default executor;
