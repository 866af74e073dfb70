export default {
  async fetch() {
    return new Response('this worker runs every minute; its log says when\n');
  },
  async scheduled(controller) {
    // One line per scheduled time on the one node that ran it (the node's log keeps it).
    console.log(`cron-example fired ${controller.cron} ${new Date(controller.scheduledTime).toISOString()}`);
  },
};
