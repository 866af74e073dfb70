export default {
  async fetch() {
    return new Response('this worker runs every minute; its log says when\n');
  },
  async scheduled(controller) {
    // One line per scheduled time, in the output of the one replica that ran it; the node records
    // the run itself as a `cron.ran` event (svc traces).
    console.log(`cron-example fired ${controller.cron} ${new Date(controller.scheduledTime).toISOString()}`);
  },
};
